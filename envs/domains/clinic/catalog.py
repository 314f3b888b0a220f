"""Fixed reference data of Riverbend Outpatient Clinic: insurers, practitioners, imaging, medicines, names.

Kept apart from the row generator so templates can name practitioners and procedures without re-reading
the database, and so the policy's numbers (fees, thresholds) have one source.
"""

from __future__ import annotations

# plan code, name, payer, imaging pre-authorisation threshold in cents (None: self-pay, no pre-authorisation)
INSURANCE_PLANS = [
    ("CASCADE_HMO", "Cascade Health HMO", "Cascade Health", 0),
    ("BLUEHARBOR_PPO", "BlueHarbor PPO", "BlueHarbor Mutual", 50000),
    ("MERIDIAN_SILVER", "Meridian Silver", "Meridian Life", 100000),
    ("NORTHSTAR_GOLD", "Northstar Gold", "Northstar Assurance", 150000),
    ("SELF_PAY", "Self-pay", "none", None),
]
PLAN_WEIGHTS = [3, 4, 3, 2, 1]

FAMILY_MEDICINE = "Family Medicine"
IMAGING = "Diagnostic Imaging"
# id, name, specialty, needs a referral, late-cancellation / no-show fee in cents
PRACTITIONERS = [
    ("PR-101", "Dr. Amara Okonjo", FAMILY_MEDICINE, 0, 4000),
    ("PR-102", "Dr. Daniel Whitcombe", FAMILY_MEDICINE, 0, 4000),
    ("PR-103", "Dr. Sofia Lindqvist", FAMILY_MEDICINE, 0, 4000),
    ("PR-104", "Dr. Rajesh Menon", FAMILY_MEDICINE, 0, 4000),
    ("PR-105", "Dr. Helen Castellano", FAMILY_MEDICINE, 0, 4000),
    ("PR-106", "Dr. Tomasz Wierzbicki", FAMILY_MEDICINE, 0, 4000),
    ("PR-111", "Dr. Grace Abernathy", "Paediatrics", 0, 4000),
    ("PR-112", "Dr. Luis Ferreira", "Paediatrics", 0, 4000),
    ("PR-121", "Maeve Donnelly, DPT", "Physiotherapy", 0, 3500),
    ("PR-122", "Kwame Asante, DPT", "Physiotherapy", 0, 3500),
    ("PR-131", "Dr. Ingrid Solberg", "Cardiology", 1, 7500),
    ("PR-132", "Dr. Marcus Obi", "Cardiology", 1, 7500),
    ("PR-141", "Dr. Yuki Nakamura", "Dermatology", 1, 7500),
    ("PR-142", "Dr. Priyanka Rao", "Dermatology", 1, 7500),
    ("PR-151", "Dr. Caleb Hargreaves", "Orthopaedics", 1, 8500),
    ("PR-152", "Dr. Nadia Haddad", "Orthopaedics", 1, 8500),
    ("PR-161", "Dr. Felix Brandt", "Endocrinology", 1, 7500),
    ("PR-171", "Dr. Olivia Marchetti", IMAGING, 0, 6000),
    ("PR-172", "Dr. Samuel Achebe", IMAGING, 0, 6000),
]
SPECIALTIES_NEEDING_REFERRAL = sorted({p[2] for p in PRACTITIONERS if p[3]})

PROCEDURES = [  # code, name, list price in cents
    ("XR_CHEST", "Chest X-ray", 9500),
    ("DEXA", "Bone density scan", 18000),
    ("US_ABDOMEN", "Abdominal ultrasound", 32000),
    ("CT_ABDOMEN", "Abdominal CT scan", 98000),
    ("ECHO", "Echocardiogram", 120000),
    ("MRI_KNEE", "Knee MRI", 145000),
    ("MRI_BRAIN", "Brain MRI", 210000),
]

MEDICINES = [  # name with strength, controlled substance
    ("Atorvastatin 20 mg", 0), ("Lisinopril 10 mg", 0), ("Metformin 500 mg", 0), ("Levothyroxine 50 mcg", 0),
    ("Sertraline 50 mg", 0), ("Amlodipine 5 mg", 0), ("Omeprazole 20 mg", 0), ("Salbutamol inhaler 100 mcg", 0),
    ("Losartan 50 mg", 0), ("Montelukast 10 mg", 0), ("Escitalopram 10 mg", 0), ("Rosuvastatin 10 mg", 0),
    ("Pantoprazole 40 mg", 0), ("Hydrochlorothiazide 25 mg", 0), ("Zolpidem 10 mg", 1), ("Lorazepam 1 mg", 1),
    ("Methylphenidate 18 mg", 1), ("Tramadol 50 mg", 1),
]

PHARMACIES = ["Walgreens, Hawthorne Blvd", "CVS, SE Division St", "Fred Meyer Pharmacy, Burnside",
              "Rite Aid, NE Broadway", "Costco Pharmacy, Tigard", "Providence Outpatient Pharmacy"]

GIVEN = ["Aisha", "Brendan", "Carmen", "Dmitri", "Esther", "Finn", "Gabriela", "Hiroshi", "Imogen", "Jamal",
         "Katarina", "Leon", "Mei", "Nikolai", "Olga", "Pedro", "Rania", "Stellan", "Tamsin", "Uriel", "Valentina",
         "Wendell", "Ximena", "Yusuf", "Zara", "Bridget", "Cyrus", "Delphine", "Emeka", "Freya"]
FAMILY = ["Albright", "Bergstrom", "Cavanagh", "Delacroix", "Eriksen", "Fontaine", "Gallagher", "Halloran",
          "Iwasaki", "Jovanovic", "Kowalczyk", "Lachance", "Mbeki", "Nakashima", "Oyelaran", "Pemberton",
          "Quintero", "Rasmussen", "Sandoval", "Thibodeaux", "Underwood", "Vasquez", "Whitfield", "Yilmaz"]
POSTCODES = ["97202", "97206", "97211", "97214", "97217", "97219", "97223", "97229", "97232", "97239"]
